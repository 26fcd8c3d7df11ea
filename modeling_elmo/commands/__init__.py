"""Plumbing shared by the console commands (`elmo-*`): argument parsing, model arguments, output-folder locks."""
