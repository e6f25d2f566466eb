"""Image stages (Pillow, OpenCV, imagehash, scikit-image): validation, quality, near-duplicates, augmentation."""
