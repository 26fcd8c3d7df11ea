"""Tools for the original format: the checkpoint reader (`original_checkpoint`), the official models (`presets`),
`elmo-convert` (`convert`), `elmo-publish` (`publish`) and random original-format checkpoints (`testing_utils`)."""
