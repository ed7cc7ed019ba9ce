"""placeholder"""
def review_command() -> None:
    """Review"""
