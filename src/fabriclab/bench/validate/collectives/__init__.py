"""validate collectives: measured on a small emulated cluster, fitted, predicted on a larger one (see the modules)."""
