"""Publishing on the Hub: pushing a folder (`push`), model cards (`model_card`) and the check that a folder loads
with `trust_remote_code=True` alone (`remote_code`)."""
