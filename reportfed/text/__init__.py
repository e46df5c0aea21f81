"""Report text: sentences, assertions and states, calibration, template sentences, the report
MLP, its local training and the model file."""
