"""The ResNet50 v1.5 training-throughput regression suite: pytest machinery and the cases."""
