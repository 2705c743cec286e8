"""Large generative models: benchmark, accuracy (perplexity, greedy agreement), roofline."""
