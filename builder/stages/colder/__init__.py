"""ColDeR: controlled document pairs from Re-DocRED probing position, brevity, repetition and foils."""
