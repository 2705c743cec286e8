"""Two error bases: UserError is one clear sentence for the user; everything else propagates."""


class UserError(Exception):
    """Something the user can fix; the message says what is wrong and what to do."""


class UnavailableError(UserError):
    """A requested backend or provider does not exist on this machine; the message says why."""
