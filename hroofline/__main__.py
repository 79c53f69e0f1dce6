from hroofline.cli.main import run

run()
