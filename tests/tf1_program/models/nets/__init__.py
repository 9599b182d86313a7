# The digit models of the TF 1.x test program (tests/tf1_program).
