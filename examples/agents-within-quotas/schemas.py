"""The models of the agents example: what each token asks of the provider."""

import msgspec


class Ask(msgspec.Struct):
    """A question for the provider, sent on behalf of one account."""

    account: str
    prompt: str
