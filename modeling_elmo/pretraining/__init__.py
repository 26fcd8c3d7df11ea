"""biLM pretraining tooling (`elmo-pretrain`): bilm-tf options, vocabulary and corpus in, TBPTT batches out."""
