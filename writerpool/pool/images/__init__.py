"""Images this install builds beyond the writer image: derived images and pruning."""
