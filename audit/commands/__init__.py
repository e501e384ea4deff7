"""One module per subcommand; each exposes a plain function that returns an exit code."""
