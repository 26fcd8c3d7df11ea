"""`elmo-pretrain build-vocab`: a bilm-tf vocabulary file from a corpus, counted streaming.

    elmo-pretrain build-vocab --train_files 'corpus/*.txt' --output vocab.txt [--min_count N | --max_size N]

The file holds `<S>`, `</S>`, `<UNK>`, then the corpus words by descending count (ties by the word). `--max_size`
counts the three special tokens, so it is the `n_tokens_vocab` of the options. An existing output is refused unless
`--overwrite`; the file is written atomically (complete or not at all). Errors are one line on stderr, exit status 2.
"""

import argparse
import os
import sys
from pathlib import Path

from ..formats.corpus import resolve_corpus_files
from ..formats.vocab import SPECIAL_TOKENS, LmVocabulary, count_words, vocabulary_from_counts
from ..foundation.checks import integer_flag
from ..foundation.errors import ToolError, ToolInputError, report
from ..foundation.output_folder import check_output_file, reason_of
from ..foundation.owned_files import output_claimed

PROG = "elmo-pretrain build-vocab"


class BuildVocabError(ToolInputError, ValueError):
    """A build-vocab run that cannot proceed (the output exists, ...)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Count the words of a corpus (streaming) and write a bilm-tf vocabulary file: <S>, </S>, <UNK>, "
        "then the words by descending count.",
    )
    parser.add_argument(
        "--train_files",
        nargs="+",
        required=True,
        metavar="GLOB",
        help="Corpus files (one whitespace-tokenized sentence per line); globs, '**' included. Quote them.",
    )
    parser.add_argument("--output", required=True, metavar="VOCAB.txt", help="The vocabulary file to write.")
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--min_count", type=integer_flag(1), metavar="N", help="Keep words seen at least N times.")
    limit.add_argument(
        "--max_size",
        type=integer_flag(len(SPECIAL_TOKENS), note=f" (it counts {', '.join(SPECIAL_TOKENS)})"),
        metavar="N",
        help="Keep the N - 3 most frequent words: N tokens in all with <S>, </S>, <UNK> (the n_tokens_vocab option).",
    )
    parser.add_argument("--overwrite", action="store_true", help="Replace an existing output file.")
    parser.add_argument("--no_progress", action="store_true", help="No progress bar.")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    output = Path(args.output)
    try:
        with output_claimed(output, PROG, BuildVocabError):
            check_output_file(output, args.overwrite, "--output", BuildVocabError)
            files = resolve_corpus_files(args.train_files)
            if output.exists() and any(output.samefile(file) for file in files):
                raise BuildVocabError(
                    f"--output {output} is one of the --train_files; write the vocabulary elsewhere."
                )
            counts = count_words(files, progress=not args.no_progress)
            tokens = vocabulary_from_counts(counts, min_count=args.min_count, max_size=args.max_size)
            check_output_file(
                output, args.overwrite, "--output", BuildVocabError
            )  # again: the count may have taken hours
            LmVocabulary(tokens, source=os.fspath(output)).save(output)
    except ToolError as error:
        return report(PROG, error)
    except OSError as error:
        print(f"{PROG}: error: cannot write {output}: {reason_of(error, with_file=False)}", file=sys.stderr)
        return 2
    total = sum(counts.values())
    kept = len(tokens) - len(SPECIAL_TOKENS)
    covered = sum(counts[word] for word in tokens[len(SPECIAL_TOKENS) :])
    share = 100.0 * covered / total if total else 100.0
    print(
        f"Counted {total:,} words ({len(counts):,} distinct) in {len(files):,} file(s); wrote {len(tokens):,} tokens "
        f"({kept:,} words + {', '.join(SPECIAL_TOKENS)}) to {output}, covering {share:.2f}% of the words. "
        f"Set n_tokens_vocab to {len(tokens)} in the training options."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
