"""The recorder: what agent runs did, in SQLite, and replaying it (`store`, `replay`)."""
