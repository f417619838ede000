"""Node failure prediction: a calibrated LightGBM classifier, baselines, metrics, reasons."""
