"""Deployment: `elmo-export-onnx` (`onnx_export`), an ELMo folder as one ONNX file for onnxruntime."""
