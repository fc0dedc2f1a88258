from recordmill.cli import console

# Worker processes import the main module again (multiprocessing's spawn and forkserver do).
if __name__ == "__main__":
    console()
