"""A small, clearly separable two-class sentence set (issue 31): every sentence is neutral filler words plus two words
of its class, and the two classes share no class word. Built deterministically from a seed, so the tests and
`benchmarks/classifier_defaults_study.py` train on the same sentences."""

import random

POSITIVE_WORDS = ["good", "great", "superb", "lovely", "wonderful", "brilliant"]
NEGATIVE_WORDS = ["bad", "awful", "poor", "dreadful", "boring", "terrible"]
FILLER_WORDS = ["the", "film", "was", "really", "and", "plot", "quite", "movie"]


def separable_sentences(count: int, seed: int) -> list[dict]:
    """`count` records `{"sentence": [words], "label": "pos" | "neg"}`, alternating labels: 1 or 2 filler words and
    three words of the label's list, in a random order."""
    generator = random.Random(seed)
    records = []
    for index in range(count):
        label = "pos" if index % 2 == 0 else "neg"
        words = generator.sample(POSITIVE_WORDS if label == "pos" else NEGATIVE_WORDS, 3)
        words += generator.choices(FILLER_WORDS, k=generator.randint(1, 2))
        generator.shuffle(words)
        records.append({"sentence": words, "label": label})
    return records
