"""The command line of a Trainer command's test run (`elmo-train-classifier`, `elmo-train-ner`), written as keywords:
`trainer_flags(output_dir=..., seed=0)` is `["--report_to=none", "--use_cpu=True", "--output_dir=...", "--seed=0"]`."""

TEST_RUN = {"report_to": "none", "use_cpu": True}  # every test run: no reporting integration, on the CPU


def trainer_flags(**values: object) -> list[str]:
    """`--NAME=VALUE` for each setting of `TEST_RUN` updated with `values` (in that order)."""
    return [f"--{name}={value}" for name, value in {**TEST_RUN, **values}.items()]
