"""The worker side of sandvisor: runs inside the sandbox, imports only msgspec and the stdlib."""
