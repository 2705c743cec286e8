"""What an answer costs: a price per hour per hardware target, and dollars per million items.

A price table is TARGET=DOLLARS pairs ("cpu=0.40,cuda=3.50"): an execution provider's name or a
cluster target's. OPTIBOARD_PRICE_PER_HOUR gives the default; a sweep stores the table it was
submitted with (SweepSpec.prices), so a shared link and a later reading price it the same way.
Cost per million = price per hour / (items per second x 3600) x 1e6, from a measured rate only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

import settings
from backend.errors import UserError
from backend.knobs import Cli, Codec

Prices = tuple[tuple[str, float], ...]

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
EXAMPLE = "cpu=0.40,cuda=3.50"
# A provider that runs on another provider's device takes that one's price unless it is named.
SAME_DEVICE = {"tensorrt": "cuda"}
MILLION = 1e6
SECONDS_PER_HOUR = 3600.0


def _refuse(what: str, part: str) -> UserError:
    return UserError(
        f"{what} takes TARGET=DOLLARS pairs with a name and a price of 0 or more dollars an hour, "
        f"such as {EXAMPLE}, not {part[:60]!r}."
    )


def parse_prices(text: str, what: str = "The price per hour") -> Prices:
    """'cpu=0.40, cuda=3.50' -> (('cpu', 0.4), ('cuda', 3.5)); anything else is one sentence."""
    found: dict[str, float] = {}
    for raw in str(text).split(","):
        part = raw.strip()
        if not part:
            continue
        name, sep, value = (p.strip() for p in part.partition("="))
        try:
            price = float(value) if sep else -1.0
        except ValueError:
            price = -1.0
        if not NAME.match(name) or not math.isfinite(price) or price < 0:
            raise _refuse(what, part)
        if name in found:
            raise UserError(f"{what} names {name!r} twice; give each target one price.")
        found[name] = price
    return tuple(found.items())


def checked(prices: Iterable[tuple[str, float]] | str, what: str = "The price per hour") -> Prices:
    """A price table from its text, pairs or mapping (a link, a stored job), checked the same."""
    if isinstance(prices, str):
        return parse_prices(prices, what)
    pairs = prices.items() if isinstance(prices, dict) else prices
    items = list(pairs)
    for item in items:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise _refuse(what, str(item))
    return parse_prices(",".join(f"{name}={_number(value)}" for name, value in items), what)


def _number(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return "?"
    return str(value)


def prices_text(prices: Prices) -> str:
    """The table as people write it: 'cpu=0.4,cuda=3.5'."""
    return ",".join(f"{name}={price:g}" for name, price in prices)


def default_prices() -> Prices:
    """OPTIBOARD_PRICE_PER_HOUR, checked (a wrong setting is one sentence naming it)."""
    return parse_prices(settings.PRICE_PER_HOUR.get(), settings.PRICE_PER_HOUR.name)


def or_default(prices: Prices) -> Prices:
    """The table a reading uses: the one given, else the setting's."""
    return prices or default_prices()


@dataclass(frozen=True)
class Price:
    """The price that applies to one configuration, and the name it was found under."""

    name: str
    per_hour: float

    @property
    def text(self) -> str:
        return f"${self.per_hour:g}/h for {self.name}"


def price_for(prices: Prices, provider: str, target: str = "") -> Price | None:
    """A cluster target's price when it has one, else its provider's (tensorrt: cuda's unless
    named); None when the table names neither."""
    table = dict(prices)
    for name in (target, provider, SAME_DEVICE.get(provider, "")):
        if name and name in table:
            return Price(name, table[name])
    return None


def unpriced_sentence(targets: Iterable[str], where: str = "--price") -> str:
    """What a table says of measured targets its prices do not name (their costs are empty);
    `where` is where the reader gives prices."""
    missing = sorted(set(targets))
    if not missing:
        return ""
    return (
        f"No price for {', '.join(missing)}, so its configurations have no cost: add "
        f"{missing[0]}=DOLLARS to {where}."
    )


def cost_per_million(per_hour: float | None, items_per_second: float | None) -> float | None:
    """Dollars per million items: per_hour / (items_per_second x 3600) x 1e6; None without a
    price or a positive finite rate (nothing measured is never free)."""
    if per_hour is None or items_per_second is None:
        return None
    rate = float(items_per_second)
    if not math.isfinite(rate) or rate <= 0 or not math.isfinite(per_hour):
        return None
    return per_hour / (rate * SECONDS_PER_HOUR) * MILLION


def dollars(value: float) -> str:
    """$0.0123, $1.23, $1,234: enough digits to tell two cheap configurations apart."""
    if value >= 100:
        return f"${value:,.0f}"
    if value >= 1:
        return f"${value:.2f}"
    import numpy as np  # here, not above: SweepSpec's price knob reaches every CLI call's parser

    return "$" + np.format_float_positional(value, precision=3, fractional=False, trim="-")


# The sweep knob (SweepSpec.prices): declared here beside its reader, spread into knob(...).
PRICE_KNOB = {
    "label": "Price per hour ($, TARGET=DOLLARS)",
    "help": "Dollars per hour of each hardware target (a provider such as cpu or cuda, or a "
    "cluster target's name), e.g. cpu=0.40,cuda=3.50; cost per million inferences = price / "
    "(samples/s x 3600) x 1e6. Empty: OPTIBOARD_PRICE_PER_HOUR, stored with the job when queued.",
    "url": "price",
    "codec": Codec(lambda prices: prices_text(prices), str),  # read back by SweepSpec's check
    "cli": Cli(
        "--price",
        metavar="TARGET=DOLLARS,...",
        help=f"dollars per hour per hardware target, e.g. {EXAMPLE} (default: "
        "OPTIBOARD_PRICE_PER_HOUR); stored with the job",
    ),
}
