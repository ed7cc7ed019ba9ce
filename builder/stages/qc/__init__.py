"""Quality control: stages that keep a query or drop it with a reason, and their shared helpers."""
