"""Sentence(-pair) classification tooling: data reading and checks (`data`), the SST reader (`sst`), metrics
(`metrics`), the output-folder policy (`output_folder`) and `elmo-train-classifier` (`train`). The model itself,
`ElmoForSequenceClassification`, lives in `modeling_elmo/modeling_elmo.py`."""
