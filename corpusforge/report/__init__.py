"""Dataset reports: one self-contained HTML file (inline SVG, no scripts, no network) and a JSON
summary with the same numbers."""
