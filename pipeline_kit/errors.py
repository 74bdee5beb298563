"""The one exception type for mistakes a user can fix (the CLI prints its message as one line and exits 2), and the
did-you-mean hint such a message gives for a misspelled name."""


class UserError(Exception):
    """A problem in the user's input (a config file, a flag, a path). The message says what and how to fix it."""

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))


def closest(word: str, options: list[str] | tuple[str, ...]) -> str | None:
    """The option closest to a misspelled `word` (difflib), or None when nothing is close."""
    import difflib  # only once a name is wrong: every `kit` start (and `kit --help`) imports this module

    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(word: str, options: list[str] | tuple[str, ...]) -> str:
    """' Did you mean 'x'?' for the closest option, or '' when nothing is close."""
    best = closest(word, options)
    return f" Did you mean '{best}'?" if best else ""
