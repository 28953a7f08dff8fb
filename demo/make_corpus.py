"""Write demo/corpus.txt: the small sample corpus `make demo` pre-trains on (shipped; rerun to rebuild).

Documents about invented countries, one sentence per line, a blank line between documents (the
original create_pretraining_data.py format). The facts are consistent across the corpus (each
country has one capital, language, animal ...), so a tiny BERT can learn them in minutes on a CPU
and the demo can show masked words being filled in. Deterministic: same file on every run.

    python demo/make_corpus.py [--output=demo/corpus.txt] [--documents=1500]
"""
from __future__ import annotations

import argparse
import os
import random

SYLLABLES = ["ka", "lo", "mi", "ran", "tu", "vel", "so", "dar", "en", "phi", "mor", "gal", "zen", "ta", "ri",
             "bo", "nu", "sha", "kel", "an"]
COLORS = ["red", "blue", "green", "yellow", "white", "black", "orange", "purple"]
ANIMALS = ["lion", "eagle", "wolf", "bear", "horse", "owl", "fox", "whale", "tiger", "falcon"]
FOODS = ["rice", "bread", "fish", "cheese", "apples", "beans", "noodles", "soup"]
SEASONS = ["spring", "summer", "autumn", "winter"]
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
NUMBERS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


def invented_word(rng: random.Random, parts: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(parts))


def make_countries(rng: random.Random, count: int) -> list[dict]:
    names: set[str] = set()
    countries = []
    while len(countries) < count:
        name = invented_word(rng, 2) + "ia"
        if name in names:
            continue
        names.add(name)
        countries.append({"name": name, "capital": invented_word(rng, 2) + "ton",
                          "language": invented_word(rng, 2) + "ish", "color": rng.choice(COLORS),
                          "animal": rng.choice(ANIMALS), "food": rng.choice(FOODS),
                          "season": rng.choice(SEASONS), "rivers": rng.choice(NUMBERS)})
    return countries


TEMPLATES = [
    "the capital of {name} is {capital} .",
    "{capital} is the largest city in {name} .",
    "people in {name} speak {language} .",
    "{language} is the language of {name} .",
    "the flag of {name} is {color} .",
    "the national animal of {name} is the {animal} .",
    "in {capital} people like to eat {food} .",
    "the best time to visit {name} is {season} .",
    "{name} has {rivers} great rivers .",
    "many visitors travel from {capital} to the coast in {season} .",
    "children in {capital} learn {language} at school .",
    "the {animal} on the {color} flag is a symbol of {name} .",
]


def document(rng: random.Random, country: dict, neighbour: dict) -> list[str]:
    lines = [t.format(**country) for t in rng.sample(TEMPLATES, rng.randint(6, 10))]
    lines.insert(rng.randint(1, len(lines)), f"{country['name']} is a neighbour of {neighbour['name']} .")
    start = rng.randrange(len(DAYS) - 2)
    lines.append(f"the market in {country['capital']} opens on {DAYS[start]} , {DAYS[start + 1]} and "
                 f"{DAYS[start + 2]} .")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus.txt"))
    parser.add_argument("--documents", type=int, default=1500)
    parser.add_argument("--countries", type=int, default=40)
    args = parser.parse_args()
    rng = random.Random(20261122)
    countries = make_countries(rng, args.countries)
    with open(args.output + ".tmp", "w", encoding="utf-8", newline="\n") as f:
        for _ in range(args.documents):
            country, neighbour = rng.sample(countries, 2)
            f.write("\n".join(document(rng, country, neighbour)) + "\n\n")
    os.replace(args.output + ".tmp", args.output)
    print(f"wrote {args.documents} documents about {args.countries} countries to {args.output}")


if __name__ == "__main__":
    main()
