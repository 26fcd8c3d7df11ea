"""The foundation every tool, drop-in and engine module builds on, below `commands/`: the error base classes and
one-line messages (`errors`), argument checks (`checks`), the file hash (`file_hash`), the output policy and the
atomic write (`output_folder`), the one record of a folder written (`folder_record`), the one claim of an output and
the owned folders (`owned_files`), and the Trainer commands' `--output_dir` lock (`output_lock`). It imports nothing
else of the package."""
