"""Multiple choice (the paper's SWAG setup): data readers, the Task, run_swag's program and the proxy-set builder."""
