"""Embed a text file (one sentence per line) with ELMo on Ray Data into a folder of Parquet files.

    python examples/ray_embed.py INPUT OUTPUT_DIR --model MODEL [--layers all|top|average] [--pooling mean]
        [--actors 2] [--threads 1] [--batch-size 256]

Every line is a row with its 0-based line index as `id` (empty lines included: `ray.data.read_text` would drop them
and lose the order). Ray is the one `ray.init()` finds: a cluster started with `ray start` (`RAY_ADDRESS`), or a new
local one. OUTPUT_DIR is replaced: a rerun writes the same rows again, never a second copy of them.
"""

import argparse
import os

os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # Ray 2.59+ writes an auth token otherwise
import ray  # noqa: E402

from modeling_elmo.embed import ElmoBatchEmbedder  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", help="text file, one sentence per line (UTF-8)")
    parser.add_argument("output", help="folder of Parquet files to write (replaced)")
    parser.add_argument("--model", required=True, help="model folder or Hub repo id, as seen by every node")
    parser.add_argument("--layers", default="all", choices=("all", "top", "average"))
    parser.add_argument("--pooling", choices=("mean",), help="one vector per line instead of one per word")
    parser.add_argument("--actors", type=int, default=2, help="model copies (one per actor)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (and CPUs) per actor")
    parser.add_argument("--batch-size", type=int, default=256, help="lines per Ray batch")
    args = parser.parse_args()

    ray.init(include_dashboard=False, log_to_driver=False)
    with open(args.input, encoding="utf-8") as handle:
        rows = [{"id": index, "text": line} for index, line in enumerate(handle.read().splitlines())]
    vectors = ray.data.from_items(rows).map_batches(
        ElmoBatchEmbedder,
        fn_constructor_kwargs={
            "model": args.model,
            "layers": args.layers,
            "pooling": args.pooling,
            "threads": args.threads,
        },
        compute=ray.data.ActorPoolStrategy(size=args.actors),
        num_cpus=args.threads,
        batch_size=args.batch_size,
        batch_format="pyarrow",
    )
    vectors.write_parquet(args.output, mode="overwrite")
    print(f"Wrote {args.output} ({len(rows)} sentences)")
    ray.shutdown()


if __name__ == "__main__":
    main()
