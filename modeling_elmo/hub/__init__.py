"""The Hub: pushing a folder (`push`), model cards (`model_card`, `source_facts`) and the check that a folder loads
with `trust_remote_code=True` alone (`remote_code`). Loading a converted folder or Hub id is the inference core's
(`inference.pretrained`)."""
