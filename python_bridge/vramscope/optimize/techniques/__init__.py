"""One module per technique; each ``suggest(ctx)`` returns the suggestions that apply."""
