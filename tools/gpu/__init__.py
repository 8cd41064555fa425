"""The GPU tools: every CUDA path of the workload (check, its paths cuda_paths and image_path), the
first GPU hour in one command (measure) and the H200 issue's measurements (bench)."""
