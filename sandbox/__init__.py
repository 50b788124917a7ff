"""bubblewrap containment: policy, argv, seccomp, limits, teardown, environment probe."""
