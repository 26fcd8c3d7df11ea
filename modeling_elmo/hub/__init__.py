"""The Hub: loading a converted folder or Hub id (`pretrained`, the one loader of the tools and drop-ins), pushing a
folder (`push`), model cards (`model_card`) and the check that a folder loads with `trust_remote_code=True` alone
(`remote_code`)."""
