# Networks for 8x8 digit images.
