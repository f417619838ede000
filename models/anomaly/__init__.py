"""Label-free anomaly scores: robust z-scores against own history and peers, as surprise."""
