"""The run folder, the contract between the runtime that writes it and the analyzer that reads it:
its layout (layout), the typed manifest (manifest), the regimes and NCCL settings (regimes), the
fusion of an op and its label syntax (fusion_choice) and the loss rules (losses). Needs no
torch, pandas or dash; imports neither the runtime (tpscope.fusion) nor the analyzer (an
import-linter contract).
"""
