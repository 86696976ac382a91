"""The tool-call pipeline: schema -> capability -> rules -> watchdog -> ask -> execute -> envelope (ORDER)."""
