"""placeholder"""
def main():
    pass
