"""Point-cloud stages (Open3D): denoising, registration, completion, augmentation."""
