"""Running a recipe: the runner with checkpoints, the plan, progress and run reports."""
