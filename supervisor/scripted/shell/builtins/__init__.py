"""The shell builtins (``echo``, ``set``, ``declare``, ``printf``, ``test`` ...), gathered in
one table by ``table``."""
