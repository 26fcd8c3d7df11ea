"""Process-wide settings that the console scripts apply first thing, for the process they own."""
