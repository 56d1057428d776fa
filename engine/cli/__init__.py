"""The `evolve` command line, its synchronous client and `evolve doctor`."""
