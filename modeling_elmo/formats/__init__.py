"""The foreign formats ELMo comes in, read and written in one place for every tool (conversion, export, embedding,
pretraining): bilm-tf's checkpoint (`original_checkpoint`: options JSON + HDF5 weights), its vocabulary (`vocab`)
and training corpus (`corpus`: tokenized shards, one sentence per line), ELMoForManyLangs models (`efml`), and the
NLPL vector repository's archives (`nlpl`: bilm-tf checkpoints in a ZIP, and the ZIPs of ELMoForManyLangs models)."""
