"""What people and machines read: live progress (`progress`), terminal tables (`tables`, `verdicts`),
markdown (`markdown`), JSON files (`json_file`); and how it is written: `terminal` (the one way to
print), `files` (output files checked before anything starts, written atomically), `numbers` (the
one way to format a number)."""
