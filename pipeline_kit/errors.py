"""The one exception type for mistakes a user can fix: the CLI prints its message as one line and exits 2."""


class UserError(Exception):
    """A problem in the user's input (a config file, a flag, a path). The message says what and how to fix it."""

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))
